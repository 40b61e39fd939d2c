"""The one error of a workflow built wrong, apart so that both the building
(`api`) and the growth's checks under lock (`growth`) raise it."""


class InvalidWorkflow(ValueError):
    """A workflow that cannot be written as built; nothing was written."""
