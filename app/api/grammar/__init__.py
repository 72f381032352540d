"""A request's grammar measured before anything builds it: what llama.cpp's parser would make of
a GBNF text (`gbnf_shape`), the repetitions a JSON schema would have the converter write out
(`schema_bounds`), and the limits both are held to (`grammar_limits`)."""
