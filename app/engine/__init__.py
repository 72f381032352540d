"""llama.cpp serving: the model handle, slots, scheduler, sampler and prefix reuse, run by one
engine thread that owns every llama.cpp compute call."""
