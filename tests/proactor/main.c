/* tests/proactor/main.c: being written */
