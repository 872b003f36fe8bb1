"""Governed tools written in Python: declare them, publish their descriptors, serve them to the executor.

Reference: ``docs/reference/tools-api.md``.
"""

from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools.context import Context, Effect, Provided, Reconciled, Secrets
from effectgate.tools.declaring import Retry, ignore, operation, tool
from effectgate.tools.dependencies import Dependencies
from effectgate.tools.dispatcher import Dispatcher
from effectgate.tools.errors import DeclarationError, Fault, Refusal, RuleRefused, RuleViolation
from effectgate.tools.modules import dispatcher_for_module, toolbox_for_module
from effectgate.tools.rules import Rule, naming_convention, writes_declare_reconcile
from effectgate.tools.scanning import scan
from effectgate.tools.secrets import REDACTED, EnvironmentSecrets, FileSecrets, SecretsProvider
from effectgate.tools.toolbox import Toolbox, publishable
from effectgate.tools.wrappers import CallerWrapper, Invocation, ListingCap, SurfaceWrapper

__all__ = [
    "REDACTED",
    "CallerWrapper",
    "Context",
    "DeclarationError",
    "Dependencies",
    "Dispatcher",
    "Effect",
    "EnvironmentSecrets",
    "Fault",
    "FileSecrets",
    "Invocation",
    "ListingCap",
    "Provided",
    "Reconciled",
    "Refusal",
    "Retry",
    "RiskTier",
    "Rule",
    "RuleRefused",
    "RuleViolation",
    "Secrets",
    "SecretsProvider",
    "SideEffectClass",
    "SurfaceWrapper",
    "Toolbox",
    "dispatcher_for_module",
    "ignore",
    "naming_convention",
    "operation",
    "publishable",
    "scan",
    "tool",
    "toolbox_for_module",
    "writes_declare_reconcile",
]
