"""Serves the example MLP (examples/mlp.vmfb) over HTTP with Ray Serve, on localhost:
POST {"x": [[4 floats]]} to http://127.0.0.1:PORT/predict, get {"y": [[3 floats]]}.
Usage: python examples/ray_serve_mlp.py [--port 8000] [--replicas 2]
(starts a Ray on this machine, deploys, sends a few requests, prints the answers and
shuts down; needs `pip install 'vmrt[ray]' 'ray[serve]'`)."""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import ray
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

import vmrt

MODULE = Path(__file__).resolve().parent / "mlp.vmfb"


@serve.deployment(ray_actor_options={"num_cpus": 0.5})
class MlpServer:
    """One replica: one vmrt context of the module, loaded once when the replica starts
    (a cold start pays the module load and its first call's code generation)."""

    def __init__(self, module_path: str):
        self.model = vmrt.load(module_path, device="local-sync")

    async def __call__(self, request: Request) -> JSONResponse:
        try:
            x = np.asarray((await request.json())["x"], np.float32)
            return JSONResponse({"y": self.model.predict(x).tolist()})
        except vmrt.VmrtError as error:  # the caller's input: 400, the replica lives on
            return JSONResponse({"error": error.one_line()}, status_code=400)
        except (KeyError, TypeError, ValueError) as error:
            return JSONResponse({"error": f"bad request: {error}"}, status_code=400)


def post(url: str, body: object) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return json.loads(error.read())


def serve_and_query(inputs: list[np.ndarray], port: int = 8000,
                    replicas: int = 1) -> list[np.ndarray]:
    """Deploys MlpServer on the Ray this process is connected to, at
    127.0.0.1:`port`/predict, posts each input, and takes the deployment down."""
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        serve.run(MlpServer.options(num_replicas=replicas).bind(str(MODULE)),
                  name="mlp", route_prefix="/predict")
        url = f"http://127.0.0.1:{port}/predict"
        return [np.asarray(post(url, {"x": x.tolist()})["y"], np.float32) for x in inputs]
    finally:
        serve.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--replicas", type=int, default=2)
    args = parser.parse_args()
    ray.init(include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((1, 4), dtype=np.float32) for _ in range(3)]
    for x, y in zip(inputs, serve_and_query(inputs, args.port, args.replicas)):
        print(f"POST /predict x={np.round(x, 3).tolist()} -> y={np.round(y, 4).tolist()}")
    ray.shutdown()


if __name__ == "__main__":
    main()
