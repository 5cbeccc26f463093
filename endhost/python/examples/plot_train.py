"""Draws `endhost bench train --json` output: test accuracy per epoch and time per
epoch, one line per system. Usage: python3 plot_train.py RESULTS.json OUT.svg|png"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)


def main(results, out):
    with open(results) as f:
        report = json.load(f)
    fig, (acc, secs) = plt.subplots(1, 2, figsize=(11, 4.2))
    for run in report["runs"]:
        epochs = [e["epoch"] for e in run["epochs"]]
        style = "--" if run["system"].startswith("gloo") else "-"
        acc.plot(epochs, [100 * e["accuracy"] for e in run["epochs"]], style, marker="o",
                 markersize=3, label=run["system"])
        secs.plot(epochs, [e["seconds"] for e in run["epochs"]], style, marker="o",
                  markersize=3, label=run["system"])
    title = (f"digits MLP, {report['hosts']} hosts, {report['rate_mbit']} Mbit/s, "
             f"{report['loss_percent']}% random loss at the switch")
    fig.suptitle(title)
    acc.set_xlabel("epoch")
    acc.set_ylabel("test accuracy (%)")
    acc.set_ylim(50, 100)
    acc.grid(alpha=0.3)
    acc.legend(loc="lower right")
    for axes in (acc, secs):
        axes.xaxis.get_major_locator().set_params(integer=True)
    secs.set_xlabel("epoch")
    secs.set_ylabel("training time per epoch (s)")
    secs.set_ylim(bottom=0)
    secs.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
