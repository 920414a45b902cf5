"""Talking to a Triton server through tritonclient (gRPC or HTTP): every network call has a deadline.

The one place that makes tritonclient clients; gevent's ``Timeout`` (a BaseException) becomes ``TimeoutError``.
tritonclient is imported when a connection is made, so importing this module costs nothing.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from generator.errors import EXIT_UNREACHABLE, GenRepoError, Problem

if TYPE_CHECKING:
    from generator.triton.proto import model_config_pb2

__all__ = [
    "PROTOCOLS",
    "Connection",
    "ServerUnreachableError",
    "check_reachable",
    "is_transport_error",
    "unreachable_error",
]

#: The protocols tritonclient speaks.
PROTOCOLS = ("grpc", "http")
#: gRPC status codes that mean "the server did not answer", not "the server answered no".
_TRANSPORT_CODES = ("StatusCode.UNAVAILABLE", "StatusCode.DEADLINE_EXCEEDED", "StatusCode.CANCELLED")


class ServerUnreachableError(GenRepoError, ConnectionError):
    """The server did not answer: refused, reset or past the deadline (exit 3).

    Also a :class:`ConnectionError`, so callers that caught the HTTP client's ``ConnectionRefusedError`` (an
    ``OSError``) before it existed still catch it.
    """

    exit_code = EXIT_UNREACHABLE


def is_transport_error(exc: BaseException) -> bool:
    """Tell whether ``exc`` means the server did not answer (refused, reset, timed out), not that it said no."""
    from tritonclient.utils import InferenceServerException

    if isinstance(exc, InferenceServerException):
        status = str(exc.status() or "")
        text = str(exc.message() or "").lower()
        return status in _TRANSPORT_CODES or "deadline exceeded" in text or "failed to connect" in text
    return isinstance(exc, (OSError, TimeoutError, ConnectionError)) or type(exc).__name__ == "Timeout"


def unreachable_error(url: str, what: str, exc: BaseException) -> ServerUnreachableError:
    """The error for a call ``what`` to ``url`` that got no answer: ``<url>: /: <what> failed: <exc>``."""
    return ServerUnreachableError([Problem(url, "", f"{what} failed: {exc}")])


@contextlib.contextmanager
def _gevent_timeout(what: str, timeout: float) -> Iterator[None]:
    """Turn gevent's ``Timeout`` (a BaseException, so ``except Exception`` misses it) into ``TimeoutError``."""
    try:
        yield
    except Exception:
        raise
    except BaseException as exc:
        if type(exc).__name__ == "Timeout":
            raise TimeoutError(f"{what}: no answer within {timeout:g} s") from exc
        raise


class Connection:
    """One tritonclient connection (gRPC or HTTP) where every call has a timeout; plain Python results.

    Calls raise what tritonclient raises (``InferenceServerException``, ``OSError``, ``TimeoutError``);
    :func:`is_transport_error` tells "no answer" from "the server said no". Use one per thread: tritonclient's HTTP
    client runs on gevent, whose hub belongs to the creating thread.
    """

    def __init__(self, url: str, protocol: str, timeout: float) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be 'grpc' or 'http', not {protocol!r}")
        self.url, self.protocol, self.timeout = url, protocol, float(timeout)
        self.module: Any = importlib.import_module(f"tritonclient.{protocol}")
        self._client: Any
        if protocol == "grpc":
            self._client = self.module.InferenceServerClient(url)
        else:
            self._client = self.module.InferenceServerClient(
                url, connection_timeout=self.timeout, network_timeout=self.timeout
            )

    def close(self) -> None:
        """Close the client (never raises)."""
        with contextlib.suppress(Exception):
            self._client.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(self, method: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """Call a client method with the timeout; gevent's Timeout (a BaseException) becomes TimeoutError.

        ``timeout`` overrides the connection's for a gRPC call; the HTTP client's timeouts are fixed when it is made.
        """
        if self.protocol == "grpc":
            kwargs["client_timeout"] = timeout if timeout is not None else self.timeout
        with _gevent_timeout(method, timeout if timeout is not None else self.timeout):
            return getattr(self._client, method)(*args, **kwargs)

    # -- health -----------------------------------------------------------------------------------------------------
    def live(self, timeout: float | None = None) -> bool:
        """``is_server_live``."""
        return bool(self._call("is_server_live", timeout=timeout))

    def ready(self, timeout: float | None = None) -> bool:
        """``is_server_ready``."""
        return bool(self._call("is_server_ready", timeout=timeout))

    def model_ready(self, model: str) -> bool:
        """``is_model_ready`` (any version)."""
        return bool(self._call("is_model_ready", model))

    def load(self, model: str, timeout: float, config: str | None = None) -> None:
        """Load ``model`` through the repository API (explicit model control), waiting at most ``timeout``.

        ``config``: a whole ModelConfig as JSON, served instead of the folder's config.pbtxt (Triton's load with a
        config override; a loaded model is reloaded with it). ``gen-repo tune`` loads each candidate so.
        """
        if self.protocol == "grpc":
            self._call("load_model", model, config=config, timeout=timeout)
            return
        # The HTTP client has one network timeout per client: loading needs a longer one than a request.
        client = self.module.InferenceServerClient(self.url, connection_timeout=self.timeout, network_timeout=timeout)
        try:
            with _gevent_timeout("load_model", timeout):
                client.load_model(model, config=config)
        finally:
            client.close()

    def unload(self, model: str) -> None:
        """Unload ``model`` through the repository API (explicit model control)."""
        self._call("unload_model", model)

    def index(self) -> list[dict[str, str]]:
        """Return the repository index: ``[{"name", "version", "state", "reason"}]``."""
        if self.protocol == "grpc":
            entries = self._call("get_model_repository_index", as_json=True).get("models", [])
        else:
            entries = self._call("get_model_repository_index")
        keys = ("name", "version", "state", "reason")
        return [{key: str(entry.get(key, "")) for key in keys} for entry in entries]

    # -- model views --------------------------------------------------------------------------------------------------
    def config(self, model: str, version: str = "") -> model_config_pb2.ModelConfig:
        """Return the server's ``ModelConfig`` for ``model`` (auto-completed fields included)."""
        from google.protobuf import json_format

        from generator.triton.proto import model_config_pb2

        if self.protocol == "grpc":
            config = model_config_pb2.ModelConfig()
            config.CopyFrom(self._call("get_model_config", model, model_version=version).config)
            return config
        doc = self._call("get_model_config", model, model_version=version)
        return json_format.ParseDict(doc, model_config_pb2.ModelConfig(), ignore_unknown_fields=True)

    def metadata(self, model: str) -> dict[str, Any]:
        """``get_model_metadata`` as ``{"name", "versions", "platform", "inputs", "outputs"}`` with int shapes."""
        doc = self._call("get_model_metadata", model, as_json=True) if self.protocol == "grpc" else self._call(
            "get_model_metadata", model
        )

        def tensors(key: str) -> list[dict[str, Any]]:
            return [
                {"name": t.get("name", ""), "datatype": t.get("datatype", ""), "shape": [int(d) for d in t["shape"]]}
                for t in doc.get(key, [])
            ]

        return {
            "name": doc.get("name", ""),
            "versions": [str(v) for v in doc.get("versions", [])],
            "platform": doc.get("platform", ""),
            "inputs": tensors("inputs"),
            "outputs": tensors("outputs"),
        }

    def statistics(self, model: str) -> tuple[int, int]:
        """(inference_count, execution_count) summed over the model's versions."""
        if self.protocol == "grpc":
            doc = self._call("get_inference_statistics", model, as_json=True)
        else:
            doc = self._call("get_inference_statistics", model)
        inferences = executions = 0
        for entry in doc.get("model_stats", []):
            if entry.get("name") == model:
                # proto3 JSON leaves zero counters out and writes int64 as strings.
                inferences += int(entry.get("inference_count", 0) or 0)
                executions += int(entry.get("execution_count", 0) or 0)
        return inferences, executions

    # -- inference ----------------------------------------------------------------------------------------------------
    def send(self, model: str, infer_inputs: Sequence[Any], outputs: Sequence[str] = ()) -> Any:
        """Run one request of prepared ``InferInput``s; return tritonclient's ``InferResult`` (nothing decoded).

        ``outputs`` names the outputs to request (all when empty). Raises InferenceServerException when refused.
        """
        requested = [self.module.InferRequestedOutput(name) for name in outputs] or None
        return self._call("infer", model, infer_inputs, outputs=requested)

    def infer(self, model: str, infer_inputs: Sequence[Any], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        """Run one request; return every requested output by name (all the server sent when ``outputs`` is empty)."""
        result = self.send(model, infer_inputs, outputs)
        names = list(outputs)
        if not names:
            response = result.get_response()
            names = [o.name for o in response.outputs] if self.protocol == "grpc" else [
                o["name"] for o in response.get("outputs", [])
            ]
        return {name: result.as_numpy(name) for name in names}


def check_reachable(url: str, protocol: str, timeout: float) -> None:
    """Raise :class:`ServerUnreachableError` unless the server at ``url`` answers ``is_server_live`` in time, live.

    A malformed URL (the client refuses it) is unreachable too: nothing can be sent there.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be 'grpc' or 'http', not {protocol!r}")
    try:
        with Connection(url, protocol, timeout) as connection:
            live = connection.live()
    except Exception as exc:
        raise unreachable_error(url, f"is_server_live over {protocol} (timeout {timeout:g} s)", exc) from exc
    if not live:
        raise ServerUnreachableError([Problem(url, "", f"the server answers over {protocol} but is not live")])
