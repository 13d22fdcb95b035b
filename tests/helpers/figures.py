"""What the figure tests read of a matplotlib figure."""


def suptitle(fig):
    """The figure's title (on the body subfigure when there is a banner)."""
    for f in [fig, *fig.subfigs]:
        if f._suptitle is not None:
            return f._suptitle.get_text()
    return ""
