# Compiled from model.py (pipeline.compiled.SOURCE_MODULES): SessionModel as an extension type
# with its per-frame methods typed, so that the fields of the model, its streams, chunks and
# frames are read as C struct members. model.py stays the source and the pure-Python reference.

import cython

# Aliased: model.py imports the Python names itself.
from pipeline.session.outbox cimport Outbox as COutbox
from pipeline.session.protocol cimport ProtocolState as CProtocolState
from pipeline.session.streams cimport Chunk as CChunk, DirectionStream as CStream
from pipeline.stomp.decoder cimport Decoder as CDecoder
from pipeline.stomp.events cimport Frame as CFrame
from pipeline.tls.offsets cimport RecordOffsets as CRecordOffsets


cdef class SessionModel:
    cdef public object session_id, client, server, options
    cdef public bint _mid_stream, _negotiated, _finished
    cdef public dict _streams, _ws_counts
    cdef public COutbox _out
    cdef public CProtocolState _protocol
    cdef public object _codec_version
    cdef public object _frame_index
    cdef public object _first, _close, _websocket, _ws_close, _tls, _tcp_offsets

    @cython.locals(stream=CStream)
    cpdef on_data_run(self, direction, offset, data, list sizes, list timestamps, list sources)

    @cython.locals(decoder=CDecoder)
    cpdef _process(self, CStream stream)

    @cython.locals(chunk=CChunk, previous=CChunk)
    cpdef _on_heartbeat(self, CStream stream, beat)

    @cython.locals(first=CChunk, last=CChunk, offsets=CRecordOffsets)
    cpdef _on_frame(self, CStream stream, CFrame frame)
