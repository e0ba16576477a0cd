"""The actions whose protocols are pinned in tests/golden/<name>.xml."""

from pathlib import Path

from icml26_agent_rosetta import (
    BackboneChange,
    CompositionPenalty,
    IndexSelector,
    LayerSelector,
    NotSelector,
    ResidueNameSelector,
    RotamerChange,
)
from icml26_agent_rosetta.actions import AndSelector

GOLDEN_ACTIONS = {
    "rotamer_core": RotamerChange(
        design_selector=LayerSelector(core=True),
        prohibit=["CYS", "PRO", "ARG", "LYS", "ASP", "GLU"],
        restrict=None,
        composition_penalties=[CompositionPenalty(types=["TRF"], target=1, weight=1.0)],
        repeats=5,
    ),
    "rotamer_repack": RotamerChange(
        design_selector=AndSelector(
            selectors=[
                IndexSelector(resnums="1-10"),
                NotSelector(selector=ResidueNameSelector(names=["GLY"])),
            ]
        ),
        repack_selector=LayerSelector(boundary=True, surface=True),
        restrict=["L", "I", "V", "F", "S", "T"],
        composition_penalties=[
            CompositionPenalty(
                types=["LEU", "ILE", "VAL", "PHE"], target=0.4, fraction=True, weight=2.5
            )
        ],
    ),
    "backbone_small": BackboneChange(
        mover="small",
        selector=IndexSelector(resnums="2-6,9"),
        nmoves=1000,
        angle_max=2.0,
        temperature=0.5,
    ),
    "backbone_backrub": BackboneChange(
        mover="backrub", selector=LayerSelector(surface=True), nmoves=50
    ),
}


GOLDEN = Path(__file__).parent / "golden"
