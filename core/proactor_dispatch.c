/* core/proactor_dispatch.c: being written */
