"""Opcode handlers, one mixin per family; :class:`InstructionTranslator` combines them.

Every handler is a method named after the CPython 3.11 opcode it implements.
"""
from .build import BuildOpcodes
from .calls import CallOpcodes
from .context import ContextOpcodes
from .exceptions import ExceptionOpcodes
from .imports import ImportOpcodes
from .iteration import IterationOpcodes
from .jumps import JumpOpcodes
from .load_store import LoadStoreOpcodes
from .matching import MatchingOpcodes
from .operators import OperatorOpcodes
from .stack import StackOpcodes

__all__ = ["BuildOpcodes", "CallOpcodes", "ContextOpcodes", "ExceptionOpcodes", "ImportOpcodes", "IterationOpcodes", "JumpOpcodes",
           "LoadStoreOpcodes", "MatchingOpcodes", "OperatorOpcodes", "StackOpcodes"]
