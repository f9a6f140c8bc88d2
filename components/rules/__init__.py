"""The rulebook: failure modes FM01-FM18 and the pure checks that find them."""

from components.rules.catalogue import RULES, Rule, explain
from components.rules.containerd import ContainerdFacts, Loss, check_containerd

__all__ = ["RULES", "ContainerdFacts", "Loss", "Rule", "check_containerd", "explain"]
