"""The text of the metadata files gen-repo writes per model: ``config.pbtxt`` and ``gen_repo/contract.json``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from generator.planning.config import render_config
from generator.planning.contract import contract_from_plan, render_contract

if TYPE_CHECKING:
    from generator.planning.contract import PlannedModel
    from generator.planning.plan import RepositoryPlan
    from generator.planning.values import ValueDomain

__all__ = ["CONFIG_FILE", "CONTRACT_FILE", "config_files", "config_text", "contract_text", "model_config_files"]

#: A model's config, relative to its model folder.
CONFIG_FILE = "config.pbtxt"
#: A model's contract, relative to its version folder.
CONTRACT_FILE = "gen_repo/contract.json"


def config_text(model: PlannedModel) -> str:
    """``<model>/config.pbtxt`` of one planned model (deterministic)."""
    return render_config(model.config)


def contract_text(model: PlannedModel, values: Mapping[str, ValueDomain] | None = None) -> str:
    """``<model>/<version>/gen_repo/contract.json`` of one planned model; ``values``: domains the build found."""
    return render_contract(contract_from_plan(model, values))


def config_files(plan: RepositoryPlan) -> dict[str, str]:
    """Every file ``gen-repo config`` writes, as repository-relative POSIX path -> text (pure, deterministic).

    ``<model>/config.pbtxt`` and ``<model>/<version>/gen_repo/contract.json`` per model and ensemble (the version
    folder holds nothing else until the build adds the model files; an ensemble's needs none).
    """
    files: dict[str, str] = {}
    planned: list[PlannedModel] = [*plan.models, *plan.ensembles]
    for model in planned:
        files.update(model_config_files(model))
    return files


def model_config_files(model: PlannedModel) -> dict[str, str]:
    """The files :func:`config_files` writes for one planned model or ensemble (repository-relative paths)."""
    return {f"{model.name}/{CONFIG_FILE}": config_text(model),
            f"{model.name}/{model.version}/{CONTRACT_FILE}": contract_text(model)}
