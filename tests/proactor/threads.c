/* tests/proactor/threads.c: being written */
