/* core/proactor_impl.h: being written */
