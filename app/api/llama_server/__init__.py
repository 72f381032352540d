"""llama-server's native API: /completion, /tokenize, /detokenize, /apply-template, /health,
/slots, /props, /metrics (llama.cpp's names), /cors-proxy, and their schemas and errors."""
