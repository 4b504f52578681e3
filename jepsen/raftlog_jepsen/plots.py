"""Latency and throughput plots (PNG, matplotlib Agg backend) with the fault windows shaded."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"ok": "tab:blue", "fail": "tab:red", "info": "tab:orange"}


def fault_windows(history):
    starts = {}
    windows = []
    for op in history:
        if op.get("f") != "nemesis":
            continue
        key = (op["window"], op["kind"])
        if op["phase"] == "start":
            starts[key] = op["invoke"]
        elif key in starts:
            windows.append((starts.pop(key), op["complete"], op["kind"]))
    return windows


def _shade(ax, windows):
    kinds = sorted({k for _, _, k in windows})
    palette = plt.get_cmap("Pastel1")
    color_of = {k: palette(i % 9) for i, k in enumerate(kinds)}
    labelled = set()
    for start, end, kind in windows:
        ax.axvspan(start, end, color=color_of[kind], alpha=0.5, label=None if kind in labelled else kind, lw=0)
        labelled.add(kind)


def write(history, out_dir, title):
    appends = [op for op in history if op.get("f") == "append"]
    windows = fault_windows(history)
    paths = []

    fig, ax = plt.subplots(figsize=(12, 5))
    _shade(ax, windows)
    for outcome, color in COLORS.items():
        ops = [op for op in appends if op["type"] == outcome]
        ax.scatter([op["invoke"] for op in ops], [1000.0 * (op["complete"] - op["invoke"]) for op in ops],
                   s=4, color=color, label="append " + outcome)
    ax.set_yscale("log")
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("append latency (ms)")
    ax.set_title(title + ": append latency")
    ax.legend(loc="upper right", fontsize=7, markerscale=3)
    path = out_dir + "/latency.png"
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    paths.append(path)

    fig, ax = plt.subplots(figsize=(12, 4))
    _shade(ax, windows)
    end = max([op["complete"] for op in appends] + [1.0])
    buckets = int(end) + 1
    for outcome, color in COLORS.items():
        counts = [0] * buckets
        for op in appends:
            if op["type"] == outcome:
                counts[int(op["complete"])] += 1
        ax.plot(range(buckets), counts, color=color, label="append " + outcome, drawstyle="steps-post")
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel("completed appends per second")
    ax.set_title(title + ": throughput")
    ax.legend(loc="upper right", fontsize=7)
    path = out_dir + "/throughput.png"
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    paths.append(path)
    return paths
