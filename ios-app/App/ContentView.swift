import SwiftUI
import UIKit
import RPCAppCore

/// The app's one screen: mode, host, port and key; Start and Stop; the status, this device's
/// addresses, the models linked into the app, and the log.
struct ContentView: View {
    @ObservedObject var model: RPCViewModel

    var body: some View {
        NavigationView {
            Form {
                Section(header: Text("Server")) {
                    Picker("Mode", selection: $model.mode) {
                        Text("Standalone").tag(AppSettings.Mode.standalone)
                        Text("Tracker").tag(AppSettings.Mode.tracker)
                        Text("Proxy").tag(AppSettings.Mode.proxy)
                    }
                    .pickerStyle(.segmented)
                    TextField(model.hostLabel, text: $model.host)
                        .keyboardType(.URL)
                        .textInputAutocapitalization(.never)
                        .disableAutocorrection(true)
                    TextField("Port", text: $model.port)
                        .keyboardType(.numberPad)
                    TextField("Key", text: $model.key)
                        .textInputAutocapitalization(.never)
                        .disableAutocorrection(true)
                    if let error = model.formError {
                        Text(error).foregroundColor(.red)
                    }
                    HStack {
                        Button(model.status.phase == .stopped ? "Start" : "Restart") { model.start() }
                        Spacer()
                        Button("Stop", role: .destructive) { model.stop() }
                            .disabled(model.status.phase == .stopped)
                    }
                    // Two buttons in one Form row: without this, a tap anywhere fires both.
                    .buttonStyle(.borderless)
                }
                Section(header: Text("Status")) {
                    Text(model.status.summary)
                        .font(.system(.footnote, design: .monospaced))
                    ForEach(model.deviceAddresses, id: \.self) { address in
                        Text("this device: \(address)").font(.footnote)
                    }
                }
                Section(header: Text("Linked models"),
                        footer: Text("Uploads run only if they are code-free.")) {
                    if model.status.linkedModels.isEmpty {
                        Text("none: see README, \"Linking models\"").foregroundColor(.secondary)
                    }
                    ForEach(model.status.linkedModels, id: \.self) { prefix in
                        Text("ffi.SystemLib(\"\(prefix)\")")
                            .font(.system(.footnote, design: .monospaced))
                    }
                }
                Section(header: Text("Log")) {
                    ForEach(model.logLines) { line in
                        VStack(alignment: .leading, spacing: 2) {
                            Text(line.message)
                                .font(.system(.caption, design: .monospaced))
                                .foregroundColor(line.isProblem ? .red : .primary)
                            Text("\(line.date, style: .time)  \(line.source)")
                                .font(.caption2)
                                .foregroundColor(.secondary)
                        }
                    }
                }
            }
            .navigationTitle("Mote RPC")
        }
        .navigationViewStyle(.stack)
    }
}
