/* core/proactor_source.c: being written */
