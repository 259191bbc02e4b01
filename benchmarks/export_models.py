"""Real architectures others wrote, as .vmfb files: torchvision and transformers models
exported to ONNX, imported with iree-import-onnx, compiled by iree-compile for llvm-cpu.

    python benchmarks/export_models.py OUT_DIR [--models resnet18,mobilenet_v3_small,bert]
        [--torch-python PYTHON] [--big]

The export step needs torch (torchvision, transformers); it runs in `--torch-python`
(default: this Python), so torch may live in a venv of its own. Weights are the
architectures' own random initialisation (seeded): no download. Each model lands as
OUT_DIR/NAME.vmfb (weights inline) with OUT_DIR/NAME.json naming its inputs (shape,
dtype). `--big` adds `linear12`, 12 x Linear(4096, 4096) (768 MiB of weights), twice:
inline (linear12.vmfb) and with its weights in an .irpa (linear12_params.vmfb +
linear12.irpa). Nothing here is kept in the repository; the files go to OUT_DIR.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

MODELS = ("resnet18", "mobilenet_v3_small", "bert")

#: The export, run by the torch-carrying Python: NAME OUT_ONNX -> prints the inputs (JSON).
EXPORT = textwrap.dedent("""
    import json, sys, torch
    name, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    if name == "bert":
        import transformers
        config = transformers.BertConfig(num_hidden_layers=4, hidden_size=512,
                                         num_attention_heads=8, intermediate_size=2048)
        class Encoder(torch.nn.Module):  # (the exporter passes arguments by position)
            def __init__(self):
                super().__init__()
                self.bert = transformers.BertModel(config)

            def forward(self, input_ids):
                return self.bert(input_ids=input_ids).last_hidden_state
        model = Encoder().eval()
        inputs = (torch.randint(0, config.vocab_size, (1, 128)),)
        names = ["input_ids"]
    elif name == "linear12":
        model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(12)]).eval()
        inputs, names = (torch.randn(1, 4096),), ["x"]
    else:
        import torchvision
        model = getattr(torchvision.models, name)(weights=None).eval()
        inputs, names = (torch.randn(1, 3, 224, 224),), ["x"]
    with torch.no_grad():
        torch.onnx.export(model, inputs, out, input_names=names, opset_version=17,
                          dynamo=False, external_data=name == "linear12")
    print(json.dumps([[list(t.shape), str(t.dtype).replace("torch.", "")] for t in inputs]))
""")

COMPILE = ["iree-compile", "--iree-hal-target-device=local",
           "--iree-hal-local-target-device-backends=llvm-cpu",
           "--iree-llvmcpu-target-cpu=host"]


def build(name: str, out: Path, torch_python: str) -> None:
    onnx, mlir = out / f"{name}.onnx", out / f"{name}.mlir"
    done = subprocess.run([torch_python, "-c", EXPORT, name, str(onnx)], check=True,
                          capture_output=True, text=True)
    (out / f"{name}.json").write_text(done.stdout.strip().splitlines()[-1])
    subprocess.run(["iree-import-onnx", str(onnx), "-o", str(mlir)], check=True)
    subprocess.run(COMPILE + [str(mlir), "-o", str(out / f"{name}.vmfb")], check=True)
    if name == "linear12":  # the same weights again, in a parameter archive
        params = mlir.with_name("linear12_params.mlir")
        subprocess.run(["iree-import-onnx", str(onnx), "-o", str(params),
                        "--externalize-params", "--num-elements-threshold=1024",
                        "--save-params-to", str(out / "linear12.irpa")], check=True)
        subprocess.run(COMPILE + [str(params), "-o", str(out / "linear12_params.vmfb")],
                       check=True)
        (out / "linear12_params.json").write_text((out / "linear12.json").read_text())
        params.unlink()
    for leftover in [onnx, mlir, *out.glob(f"{name}.onnx.data"), *out.glob("*.onnx_data")]:
        leftover.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--torch-python", default=sys.executable)
    parser.add_argument("--big", action="store_true", help="add linear12 (768 MiB)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.models.split(",") if n] + (["linear12"] if args.big else [])
    for name in names:
        if not (args.out / f"{name}.vmfb").exists():
            print(f"building {name}", flush=True)
            build(name, args.out, args.torch_python)
    print(json.dumps({n: json.loads((args.out / f"{n}.json").read_text()) for n in names}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
