package import Foundation

extension Process {
    /// Starts the process and waits for it to exit without holding a thread. Swift Testing runs
    /// tests on the cooperative pool (two threads on a 2-core machine); a test that blocks one
    /// while a long command runs (the container test takes a minute) starves every async test
    /// running alongside, and their timing goes with it.
    package func runUntilExit() async throws -> Int32 {
        try await withCheckedThrowingContinuation { continuation in
            terminationHandler = { process in continuation.resume(returning: process.terminationStatus) }
            do {
                try run()
            } catch {
                terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
    }

    /// Runs to the end with its standard output and error in files, waiting without holding a
    /// thread (`runUntilExit`): reading a pipe to its end would block one of the cooperative
    /// pool's two threads for as long as the program runs. With `mergingErrors` both go to
    /// `stdout`; standard input is `input`, or nothing. Returns the exit status and what the
    /// program printed.
    package func runCapturingOutput(
        input: FileHandle? = nil,
        mergingErrors: Bool = false
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let base = NSTemporaryDirectory() + "lansync-test-output-\(UUID().uuidString)"
        let outPath = base + ".out"
        let errPath = base + ".err"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let errors = mergingErrors ? output : try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        let input = input ?? FileHandle(forReadingAtPath: "/dev/null")
        // Closed here, not when released: a Process run with a termination handler keeps its
        // handles open after it ends (one descriptor per run stayed open). Past about 1,360
        // open descriptors, Foundation's spawn, which lists /proc/self/fd and copies 256 bytes of
        // each name, read beyond its buffer and crashed the test process.
        defer {
            for handle in [output, mergingErrors ? nil : errors, input].compactMap({ $0 }) { try? handle.close() }
        }
        standardOutput = output
        standardError = errors
        standardInput = input
        let status = try await runUntilExit()
        let read = { (path: String) in
            String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
        }
        return (status, read(outPath), read(errPath))
    }
}
