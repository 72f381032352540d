"""Questions to documents: `DocQuestions`, retrieval, the prompt layout, chat sources and blend
requests."""
