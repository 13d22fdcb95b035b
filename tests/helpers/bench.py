"""What the bench tests read: its CSV rows and its one-line errors."""
import csv


def read_rows(path):
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        return reader.fieldnames, list(reader)


def num(v):
    return float(v) if v not in ("", None) else None


def one_error_line(err):
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: bubbleflow bench: "), err
    assert "Traceback" not in err
    return lines[0]
