"""The model's chat template: `Prompter` (messages -> text -> tokens) and reasoning told apart
from the answer."""
