"""Confluent Schema Registry's error answers: ``{"error_code": 40401, "message": "..."}``.

The HTTP status is the error code's first three digits (40401 → 404, 42201 → 422, 409 → 409),
which is what clients (``RestClientException.getErrorCode``, confluent-kafka's
``SchemaRegistryError.error_code``) rely on. Every refusal the registry makes is one of these;
anything else escaping a handler is a bug, answered 500/50001 by the app without a traceback.
"""

from __future__ import annotations

__all__ = ["RegistryError"]


class RegistryError(Exception):
    """A refusal with Confluent's error code and message."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    @property
    def http_status(self) -> int:
        code = self.error_code
        while code >= 1000:
            code //= 10
        return code

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}

    # -- 401xx, 403xx ---------------------------------------------------------------------------
    @classmethod
    def unauthorized(cls) -> RegistryError:
        return cls(40101, "Unauthorized")

    @classmethod
    def forbidden(cls, detail: str) -> RegistryError:
        return cls(40301, f"Forbidden: {detail}")

    # -- 404xx ---------------------------------------------------------------------------------
    @classmethod
    def subject_not_found(cls, subject: str) -> RegistryError:
        return cls(40401, f"Subject '{subject}' not found.")

    @classmethod
    def version_not_found(cls, version: object) -> RegistryError:
        return cls(40402, f"Version {version} not found.")

    @classmethod
    def schema_not_found(cls) -> RegistryError:
        return cls(40403, "Schema not found")

    @classmethod
    def schema_id_not_found(cls, schema_id: object) -> RegistryError:
        return cls(40403, f"Schema {schema_id} not found")

    @classmethod
    def subject_soft_deleted(cls, subject: str) -> RegistryError:
        return cls(40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")

    @classmethod
    def subject_not_soft_deleted(cls, subject: str) -> RegistryError:
        return cls(40405, f"Subject '{subject}' was not deleted first before being permanently deleted")

    @classmethod
    def version_soft_deleted(cls, subject: str, version: int) -> RegistryError:
        return cls(
            40406,
            f"Subject '{subject}' Version {version} was soft deleted."
            "Set permanent=true to delete permanently",
        )

    @classmethod
    def version_not_soft_deleted(cls, subject: str, version: int) -> RegistryError:
        return cls(
            40407,
            f"Subject '{subject}' Version {version} was not deleted first before being permanently deleted",
        )

    @classmethod
    def subject_compatibility_not_configured(cls, subject: str) -> RegistryError:
        return cls(40408, f"Subject '{subject}' does not have subject-level compatibility configured")

    @classmethod
    def subject_mode_not_configured(cls, subject: str) -> RegistryError:
        return cls(40409, f"Subject '{subject}' does not have subject-level mode configured")

    # -- 409, 422xx ----------------------------------------------------------------------------
    @classmethod
    def incompatible(cls, subject: str, messages: list[str]) -> RegistryError:
        return cls(
            409,
            f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
            f"details: [{', '.join(messages)}]",
        )

    @classmethod
    def invalid_schema(cls, detail: str) -> RegistryError:
        return cls(42201, f"Invalid schema: {detail}")

    @classmethod
    def invalid_version(cls, version: str) -> RegistryError:
        return cls(
            42202,
            f"The specified version '{version}' is not a valid version id. "
            'Allowed values are between [1, 2^31-1] and the string "latest"',
        )

    @classmethod
    def invalid_compatibility_level(cls) -> RegistryError:
        return cls(
            42203,
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive",
        )

    @classmethod
    def invalid_mode(cls) -> RegistryError:
        return cls(42204, "Invalid mode. Valid values are READWRITE, READONLY, and IMPORT.")

    @classmethod
    def operation_not_permitted(cls, message: str) -> RegistryError:
        return cls(42205, message)

    @classmethod
    def reference_exists(cls, message: str) -> RegistryError:
        return cls(42206, message)

    @classmethod
    def unprocessable(cls, message: str) -> RegistryError:
        return cls(422, message)

    @classmethod
    def bad_request(cls, message: str) -> RegistryError:
        return cls(400, message)

    # -- 500xx ---------------------------------------------------------------------------------
    @classmethod
    def store_error(cls, detail: str) -> RegistryError:
        return cls(50001, f"Error in the backend data store - {detail}")

    @classmethod
    def timeout(cls, detail: str) -> RegistryError:
        return cls(50002, f"Operation timed out - {detail}")

    @classmethod
    def forwarding_failed(cls, detail: str) -> RegistryError:
        return cls(50003, f"Error while forwarding the request to the leader - {detail}")
