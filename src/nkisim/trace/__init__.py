"""Instruction events: one ``Instruction`` per executed instruction, collected by ``record()``.

Nothing is built while nobody records (the dispatcher tests one attribute). Imports nothing from
nkisim above ``errors``; ``isa.dispatch`` builds the events, ``runtime.launch`` hands them over.
"""
from .events import Instruction, Operand, Recording, active, record

__all__ = ["Instruction", "Operand", "Recording", "record", "active"]

