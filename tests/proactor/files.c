/* tests/proactor/files.c: being written */
