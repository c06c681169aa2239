/* core/proactor.c: being written */
