/* tests/proactor/bad_input.c: being written */
