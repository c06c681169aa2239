/* core/proactor_backends.c: being written */
