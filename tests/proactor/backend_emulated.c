/* tests/proactor/backend_emulated.c: being written */
