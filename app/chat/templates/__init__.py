"""The model's chat template: `Prompter` (messages -> text -> tokens), reasoning told apart from
the answer, the Jinja template rendered as llama-server renders it (`chat_template`), llama.cpp's
built-in templates (`builtin_template`), and which one a server uses (`template_choice`)."""
