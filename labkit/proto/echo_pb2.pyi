from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UploadStatusCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN: _ClassVar[UploadStatusCode]
    OK: _ClassVar[UploadStatusCode]
    FAILED: _ClassVar[UploadStatusCode]
UNKNOWN: UploadStatusCode
OK: UploadStatusCode
FAILED: UploadStatusCode

class EchoRequest(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    def __init__(self, payload: _Optional[bytes] = ...) -> None: ...

class EchoResponse(_message.Message):
    __slots__ = ("payload_length",)
    PAYLOAD_LENGTH_FIELD_NUMBER: _ClassVar[int]
    payload_length: int
    def __init__(self, payload_length: _Optional[int] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("content",)
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    content: bytes
    def __init__(self, content: _Optional[bytes] = ...) -> None: ...

class UploadStatus(_message.Message):
    __slots__ = ("message", "code", "bytes_received", "sha256")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    message: str
    code: UploadStatusCode
    bytes_received: int
    sha256: str
    def __init__(self, message: _Optional[str] = ..., code: _Optional[_Union[UploadStatusCode, str]] = ..., bytes_received: _Optional[int] = ..., sha256: _Optional[str] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("via",)
    VIA_FIELD_NUMBER: _ClassVar[int]
    via: str
    def __init__(self, via: _Optional[str] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("body",)
    BODY_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    def __init__(self, body: _Optional[bytes] = ...) -> None: ...
