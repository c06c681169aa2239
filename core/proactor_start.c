/* core/proactor_start.c: being written */
