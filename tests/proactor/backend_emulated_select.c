/* tests/proactor/backend_emulated_select.c: being written */
