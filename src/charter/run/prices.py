"""The price table: USD per million tokens per model, from ``[pricing]`` in charter.toml.

```toml
[pricing]
strict = false                      # true: running an unpriced model is an error
default_max_output_tokens = 4096    # the worst-case output when a call sets no max_tokens

[pricing.models."gpt-5.4-mini"]
input_per_mtok = 0.25
output_per_mtok = 2.0
```
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import PricingError

DEFAULT_MAX_OUTPUT_TOKENS = 4096


@dataclass(frozen=True)
class ModelPrice:
    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6

    def to_dict(self) -> dict[str, float]:
        return {"input_per_mtok": self.input_per_mtok, "output_per_mtok": self.output_per_mtok}


@dataclass(frozen=True)
class PriceTable:
    models: Mapping[str, ModelPrice] = field(default_factory=dict)
    strict: bool = False
    default_max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS

    def price(self, model: str | None) -> ModelPrice | None:
        if not model:
            return None
        return self.models.get(model)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> PriceTable:
        if not data:
            return cls()
        unknown = set(data) - {"strict", "default_max_output_tokens", "models"}
        if unknown:
            raise PricingError(f"[pricing]: unknown field(s) {', '.join(sorted(unknown))}")
        strict = data.get("strict", False)
        if not isinstance(strict, bool):
            raise PricingError("[pricing].strict must be true or false")
        max_out = data.get("default_max_output_tokens", DEFAULT_MAX_OUTPUT_TOKENS)
        if isinstance(max_out, bool) or not isinstance(max_out, int) or max_out < 1:
            raise PricingError("[pricing].default_max_output_tokens must be an integer >= 1")
        raw_models = data.get("models", {})
        if not isinstance(raw_models, Mapping):
            raise PricingError("[pricing].models must be a table of model names")
        models: dict[str, ModelPrice] = {}
        for name, entry in raw_models.items():
            if not isinstance(entry, Mapping):
                raise PricingError(f"[pricing.models.{name!r}] must be a table")
            extra = set(entry) - {"input_per_mtok", "output_per_mtok"}
            if extra:
                raise PricingError(
                    f"[pricing.models.{name!r}]: unknown field(s) {', '.join(sorted(extra))}"
                )
            values: list[float] = []
            for key in ("input_per_mtok", "output_per_mtok"):
                value = entry.get(key)
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise PricingError(f"[pricing.models.{name!r}].{key} must be a number")
                if not math.isfinite(value) or value < 0:
                    raise PricingError(f"[pricing.models.{name!r}].{key} must be >= 0")
                values.append(float(value))
            models[str(name)] = ModelPrice(values[0], values[1])
        return cls(models, strict, max_out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "strict": self.strict,
            "default_max_output_tokens": self.default_max_output_tokens,
            "models": {k: v.to_dict() for k, v in self.models.items()},
        }


def load_prices(manifest_path: str | Path | None) -> PriceTable:
    """The ``[pricing]`` table of ``manifest_path`` (a charter.toml); empty when absent."""
    if manifest_path is None:
        return PriceTable()
    path = Path(manifest_path)
    if path.is_dir():
        path = path / "charter.toml"
    if not path.is_file() or path.suffix != ".toml":
        return PriceTable()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PricingError(f"{path}: cannot read [pricing]: {exc}") from exc
    pricing = data.get("pricing")
    if pricing is not None and not isinstance(pricing, Mapping):
        raise PricingError(f"{path}: [pricing] must be a table")
    return PriceTable.from_mapping(pricing)


__all__ = ["DEFAULT_MAX_OUTPUT_TOKENS", "ModelPrice", "PriceTable", "load_prices"]
