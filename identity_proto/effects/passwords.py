"""Passwords (CPU-heavy: performed in a worker thread under the async driver)."""

from __future__ import annotations

from dataclasses import dataclass, field

from identity_proto.effects.base import ComputeEffect


@dataclass(frozen=True, slots=True)
class HashPassword(ComputeEffect[str]):
    """bcrypt hash of `password` with 2**`rounds` iterations, in Modular Crypt Format."""

    password: str = field(repr=False)
    rounds: int = 10

    def compute(self) -> str:
        """Hash with libpass (bcrypt)."""
        from passlib.hash import bcrypt

        return str(bcrypt.using(rounds=self.rounds).hash(self.password))


@dataclass(frozen=True, slots=True)
class VerifyPassword(ComputeEffect[bool]):
    """Whether `password` matches `password_hash` (bcrypt or argon2, Modular Crypt Format)."""

    password: str = field(repr=False)
    password_hash: str = field(repr=False)

    def compute(self) -> bool:
        """Verify with libpass; an unknown or malformed hash never matches."""
        from identity_proto.passwords import password_context

        try:
            return bool(password_context().verify(self.password, self.password_hash))
        except (ValueError, TypeError):
            return False
