"""The default progress display: one line on a terminal, redrawn at most ten times a
second, ended when a phase completes."""

import time


def _mb(n):
    return "%.1f MB" % (n / 1e6)


class TerminalBar:
    """A callable(phase, done, total) drawing a bar on a terminal stream."""

    WIDTH = 30

    def __init__(self, stream):
        self.stream = stream
        self.last = 0.0
        self.open = False

    @staticmethod
    def wanted(stream) -> bool:
        try:
            return stream.isatty()
        except (AttributeError, ValueError):
            return False

    def __call__(self, phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        end = total > 0 and done >= total
        if not end and now - self.last < 0.1:
            return
        self.last = now
        frac = min(1.0, done / total) if total > 0 else 0.0
        fill = int(frac * self.WIDTH)
        self.stream.write("\rmegacache %-7s [%s%s] %3d%% %s / %s" % (
            phase, "#" * fill, "." * (self.WIDTH - fill), int(frac * 100), _mb(done),
            _mb(total)))
        self.open = not end
        if end:
            self.stream.write("\n")
        self.stream.flush()
