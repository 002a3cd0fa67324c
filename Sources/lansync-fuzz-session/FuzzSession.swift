import LANSyncTestSupport

/// libFuzzer's entry point for the sync session: each input is a script of messages with extreme
/// values, local writes and clock ticks (see `SessionFuzzing`), run against the real state
/// machine and a real SQLite replica; the same bytes also drive the pairing machines (`PairingFuzzing`).
///
/// Build and run (see scripts/fuzz):
///     swift build --scratch-path .build-fuzz --product lansync-fuzz-session --sanitize fuzzer
///     .build-fuzz/debug/lansync-fuzz-session Fuzz/corpus/session -max_total_time=60
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSession(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    SessionFuzzing.runBlocking(bytes)
    PairingFuzzing.check(bytes)
    return 0
}
