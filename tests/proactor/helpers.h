/* tests/proactor/helpers.h: being written */
