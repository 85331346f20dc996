"""A two-layer MLP through AOTInductor, one way per run (argv[1]), no zoo-matrix code:

- ``plain``: ``aoti_compile_and_package`` on CUDA, then ``aoti_load_package``;
- ``cpu``: the same packaged for CPU;
- ``aot_load``: the older ``torch._export.aot_compile`` / ``aot_load`` path;
- ``runner``: the package's ``.so`` through ``AOTIModelContainerRunnerCuda`` directly.

Prints how far it got (compiled, loaded, ran with its difference to eager)."""

from __future__ import annotations

import glob
import os
import sys
import tempfile
import time
import zipfile

import torch


def main(variant: str) -> None:
    start = time.time()
    device = "cpu" if variant == "cpu" else "cuda"
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    ).to(device)
    model.eval()
    x = torch.randn(8, 64, device=device)
    folder = tempfile.mkdtemp()
    with torch.no_grad():
        expected = model(x)
        if variant == "aot_load":
            options = {"aot_inductor.output_path": os.path.join(folder, "m.so")}
            library = torch._export.aot_compile(model, (x,), options=options)
            print(variant, "compiled", library, round(time.time() - start, 1), flush=True)
            run = torch._export.aot_load(library, "cuda")
            print(variant, "loaded", flush=True)
            out = run(x)
        else:
            program = torch.export.export(model, (x,), strict=False)
            package = torch._inductor.aoti_compile_and_package(
                program, package_path=os.path.join(folder, "m.pt2")
            )
            print(variant, "compiled", round(time.time() - start, 1), flush=True)
            if variant == "runner":
                zipfile.ZipFile(package).extractall(os.path.join(folder, "x"))
                pattern = os.path.join(folder, "x", "**", "*.so")
                library = glob.glob(pattern, recursive=True)[0]
                runner = torch._C._aoti.AOTIModelContainerRunnerCuda(
                    library, 1, "cuda", os.path.dirname(library)
                )
                print(variant, "loaded", flush=True)
                out = runner.run([x])[0]
            else:
                run = torch._inductor.aoti_load_package(package)
                print(variant, "loaded", flush=True)
                out = run(x)
    difference = (out - expected).abs().max().item()
    print(variant, "ran, max abs difference", difference, round(time.time() - start, 1))


if __name__ == "__main__":
    main(sys.argv[1])
