"""Iteration, and generators run to completion (generator expressions)."""
from __future__ import annotations

from ...bytecode import version
from ...exc import unsupported
from ..variables.constant import ConstantVariable
from ..variables.containers import IteratorVariable, iterate


class IterationOpcodes:
    def GET_ITER(self, inst):
        self.push(iterate(self, self.pop()))

    def FOR_ITER(self, inst):
        if not isinstance(self.stack[-1], IteratorVariable):
            raise unsupported(f"iterating over {self.stack[-1].describe()}")
        item = self.stack[-1].next_item(self)
        if item is None:
            if version.FOR_ITER_JUMPS_TO_END_FOR:
                # as dis counts the stack: the iterator and a value, removed by END_FOR
                self.push(ConstantVariable(None))
            else:
                self.pop()
            self.jump(inst)
        else:
            self.push(item)

    def END_FOR(self, inst):
        # 3.12: pops the iterator and FOR_ITER's value; 3.13: one of them (POP_TOP follows).
        self.popn(-version.stack_effect("END_FOR", None, jump=False))

    def RETURN_GENERATOR(self, inst):
        self.push(ConstantVariable(None))  # popped by the POP_TOP that follows

    def YIELD_VALUE(self, inst):
        # Pause (InstructionTranslator.resume_generator): the value goes to whoever pulled
        # an item; the value sent back in is None (next() sends None).
        self.yielded = self.pop()
        self.push(ConstantVariable(None))

    def GET_YIELD_FROM_ITER(self, inst):
        if not isinstance(self.stack[-1], IteratorVariable):
            self.push(iterate(self, self.pop()))

    def SEND(self, inst):
        sent = self.pop()
        if not (sent.is_python_constant() and sent.as_python_constant() is None):
            raise unsupported("generator.send() of a value")
        iterator = self.stack[-1]
        if not isinstance(iterator, IteratorVariable):
            raise unsupported(f"yield from {iterator.describe()}")
        item = iterator.next_item(self)
        if item is None:
            if not version.PY_3_12:  # 3.12+: END_SEND, the target, pops the iterator
                self.pop()
            returned = getattr(getattr(iterator, "frame", None), "return_value", None)
            self.push(returned or ConstantVariable(None))  # the value of `yield from`
            self.jump(inst)
        else:
            self.push(item)

    def CLEANUP_THROW(self, inst):
        # 3.12+: the handler of an exception thrown into a generator suspended in
        # `yield from`/`await` (throw(), close()). The translator never throws into one:
        # a traced throw()/close() breaks at that call, so this names the reason if a
        # later model of throw() reaches it.
        raise unsupported("CLEANUP_THROW: an exception thrown into `yield from`/`await` "
                          "(generator.throw/close) is not traced")

    def END_SEND(self, inst):
        value = self.pop()
        self.pop()
        self.push(value)
