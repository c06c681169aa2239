/* tests/proactor/helpers.c: being written */
