/* tests/proactor/cancel.c: being written */
