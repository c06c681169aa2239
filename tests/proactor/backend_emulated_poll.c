/* tests/proactor/backend_emulated_poll.c: being written */
