/* core/proactor_backends.h: being written */
