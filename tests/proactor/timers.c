/* tests/proactor/timers.c: being written */
