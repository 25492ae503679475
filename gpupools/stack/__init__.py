"""The stack file: reading it as Pulumi does, its config models, provider keys and one-line errors."""
