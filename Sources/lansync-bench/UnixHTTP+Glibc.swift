import Foundation
import Glibc

/// One HTTP/1.1 request to an agent's local API over its Unix socket (`api.sock`), blocking: a
/// poll of a few hundred microseconds, where running `lansync status` costs tens of milliseconds
/// and would hide the latency a benchmark measures.
enum UnixHTTP {
    /// The status and body of `method path` with `token`, or nil when the socket does not answer.
    static func request(
        socket path: String,
        _ method: String,
        _ target: String,
        token: String,
        body: String? = nil
    ) -> (status: Int, body: String)? {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { return nil }
        let content = Array((body ?? "").utf8)
        var request = "\(method) \(target) HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(token)\r\n"
        request += "Connection: close\r\nContent-Type: application/json\r\nContent-Length: \(content.count)\r\n\r\n"
        let out = Array(request.utf8) + content
        guard write(descriptor, out, out.count) == out.count else { return nil }
        var received = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else { break }
            received += buffer[0..<count]
        }
        let text = String(decoding: received, as: UTF8.self)
        guard let statusLine = text.split(separator: "\r\n").first,
            let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "")
        else { return nil }
        let separator = text.range(of: "\r\n\r\n")
        return (status, separator.map { String(text[$0.upperBound...]) } ?? "")
    }
}
