#include "ui/canvas/imgui_canvas.h"

#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <QKeyEvent>
#include <QMouseEvent>
#include <QOpenGLContext>
#include <QOpenGLFunctions>
#include <QWheelEvent>
#include <chrono>
#include <utility>

#include "ui/canvas/imgui_qt_input.h"

namespace meshscope::ui {

namespace {

// Makes a canvas's ImGui context current for a scope and restores the
// previous one (several canvases may exist).
class ContextScope {
  public:
    explicit ContextScope(ImGuiContext* ctx) : m_previous(ImGui::GetCurrentContext()) {
        ImGui::SetCurrentContext(ctx);
    }
    ~ContextScope() { ImGui::SetCurrentContext(m_previous); }

  private:
    ImGuiContext* m_previous;
};

}  // namespace

ImGuiCanvas::ImGuiCanvas(QWidget* parent) : QOpenGLWidget(parent) {
    ImGuiContext* previous = ImGui::GetCurrentContext();
    m_context = ImGui::CreateContext();
    ImGui::SetCurrentContext(m_context);
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // window layout lives in QSettings
    io.LogFilename = nullptr;
    ImGuiQtInput::setupKeyMap(io);
    ImGui::StyleColorsLight();
    ImGui::SetCurrentContext(previous);
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    m_clock.start();
}

ImGuiCanvas::~ImGuiCanvas() {
    if (m_glReady) {
        makeCurrent();
        ContextScope scope(m_context);
        ImGui_ImplOpenGL3_Shutdown();
        if (m_opaqueProgram) context()->functions()->glDeleteProgram(m_opaqueProgram);
        doneCurrent();
    }
    ImGui::DestroyContext(m_context);
}

void ImGuiCanvas::initializeGL() {
    ContextScope scope(m_context);
    if (m_glReady) ImGui_ImplOpenGL3_Shutdown();  // re-parented: a new GL context
    m_glES = context()->isOpenGLES();
    ImGui_ImplOpenGL3_Init(m_glES ? "#version 300 es" : "#version 130");
    m_opaqueProgram = 0;  // belonged to the old context
    m_opaqueFailed = false;
    m_fontScale = 0;
    m_glReady = true;
}

void ImGuiCanvas::ensureFonts() {
    qreal dpr = devicePixelRatioF();
    if (dpr == m_fontScale) return;
    // Rasterize the font at device pixels and scale back: crisp on high-DPI.
    ImGuiIO& io = ImGui::GetIO();
    io.Fonts->Clear();
    ImFontConfig config;
    config.SizePixels = float(13.0 * dpr);
    io.Fonts->AddFontDefault(&config);
    io.FontGlobalScale = float(1.0 / dpr);
    ImGui_ImplOpenGL3_DestroyFontsTexture();
    ImGui_ImplOpenGL3_CreateFontsTexture();
    m_fontScale = dpr;
}

void ImGuiCanvas::paintGL() {
    ContextScope scope(m_context);
    ensureFonts();
    ImGuiIO& io = ImGui::GetIO();
    qreal dpr = devicePixelRatioF();
    io.DisplaySize = ImVec2(float(width()), float(height()));
    io.DisplayFramebufferScale = ImVec2(float(dpr), float(dpr));
    io.DeltaTime = std::max(float(m_clock.restart()) / 1000.0f, 1e-4f);

    auto t0 = std::chrono::steady_clock::now();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui::NewFrame();
    drawFrame();
    ImGui::Render();
    m_lastDrawMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

    QOpenGLFunctions* gl = context()->functions();
    gl->glViewport(0, 0, int(width() * dpr), int(height() * dpr));
    gl->glClearColor(1, 1, 1, 1);
    gl->glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    m_lastVertices = ImGui::GetDrawData()->TotalVtxCount;
    ++m_frames;
    emit frameRendered();
}

void ImGuiCanvas::beginOpaqueLayer(ImDrawList* list) {
    list->AddCallback(&ImGuiCanvas::useOpaqueProgram, this);
}

void ImGuiCanvas::endOpaqueLayer(ImDrawList* list) {
    list->AddCallback(ImDrawCallback_ResetRenderState, nullptr);
}

// Runs inside ImGui_ImplOpenGL3_RenderDrawData with ImGui's program bound:
// the opaque program takes ImGui's attribute slots and projection, so the
// following draw commands of the list use it until the reset callback.
void ImGuiCanvas::useOpaqueProgram(const ImDrawList*, const ImDrawCmd* cmd) {
    auto* self = static_cast<ImGuiCanvas*>(cmd->UserCallbackData);
    if (self->m_opaqueFailed || !self->m_opaqueEnabled) return;
    QOpenGLFunctions* gl = QOpenGLContext::currentContext()->functions();
    GLint imguiProgram = 0;
    gl->glGetIntegerv(GL_CURRENT_PROGRAM, &imguiProgram);
    if (!self->m_opaqueProgram) self->m_opaqueProgram = self->buildOpaqueProgram(imguiProgram);
    if (!self->m_opaqueProgram) return;
    GLfloat projection[16];
    gl->glGetUniformfv(imguiProgram, gl->glGetUniformLocation(imguiProgram, "ProjMtx"), projection);
    gl->glUseProgram(self->m_opaqueProgram);
    gl->glUniformMatrix4fv(gl->glGetUniformLocation(self->m_opaqueProgram, "ProjMtx"), 1, GL_FALSE,
                           projection);
    gl->glDisable(GL_BLEND);
}

unsigned ImGuiCanvas::buildOpaqueProgram(unsigned imguiProgram) {
    QOpenGLFunctions* gl = QOpenGLContext::currentContext()->functions();
    const char* version = m_glES ? "#version 300 es\nprecision mediump float;\n" : "#version 130\n";
    const char* vertex =
        "uniform mat4 ProjMtx;\nin vec2 Position;\nin vec2 UV;\nin vec4 Color;\n"
        "out vec4 Frag_Color;\nvoid main() {\n  Frag_Color = Color;\n"
        "  gl_Position = ProjMtx * vec4(Position.xy, 0.0, 1.0);\n}\n";
    const char* fragment =
        "in vec4 Frag_Color;\nout vec4 Out_Color;\nvoid main() { Out_Color = Frag_Color; }\n";
    auto compile = [&](GLenum kind, const char* body) {
        GLuint shader = gl->glCreateShader(kind);
        const char* parts[] = {version, body};
        gl->glShaderSource(shader, 2, parts, nullptr);
        gl->glCompileShader(shader);
        GLint ok = 0;
        gl->glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
        return std::pair{shader, ok != 0};
    };
    auto [vs, vsOk] = compile(GL_VERTEX_SHADER, vertex);
    auto [fs, fsOk] = compile(GL_FRAGMENT_SHADER, fragment);
    GLuint program = gl->glCreateProgram();
    gl->glAttachShader(program, vs);
    gl->glAttachShader(program, fs);
    for (const char* name : {"Position", "UV", "Color"}) {
        GLint slot = gl->glGetAttribLocation(imguiProgram, name);
        if (slot >= 0) gl->glBindAttribLocation(program, GLuint(slot), name);
    }
    gl->glLinkProgram(program);
    GLint linked = 0;
    gl->glGetProgramiv(program, GL_LINK_STATUS, &linked);
    gl->glDeleteShader(vs);
    gl->glDeleteShader(fs);
    if (vsOk && fsOk && linked) return program;
    gl->glDeleteProgram(program);
    m_opaqueFailed = true;
    qWarning("meshscope-gui: the opaque-layer shader did not build; drawing bars as usual");
    return 0;
}

double ImGuiCanvas::renderFrameNow() {
    auto t0 = std::chrono::steady_clock::now();
    makeCurrent();
    paintGL();
    context()->functions()->glFinish();
    doneCurrent();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void ImGuiCanvas::mouseMoveEvent(QMouseEvent* event) {
    ContextScope scope(m_context);
    ImGuiQtInput::mouseMove(ImGui::GetIO(), event->position());
    update();
}

void ImGuiCanvas::mousePressEvent(QMouseEvent* event) {
    ContextScope scope(m_context);
    ImGuiQtInput::mouseButton(ImGui::GetIO(), event->button(), true);
    update();
}

void ImGuiCanvas::mouseReleaseEvent(QMouseEvent* event) {
    ContextScope scope(m_context);
    ImGuiQtInput::mouseButton(ImGui::GetIO(), event->button(), false);
    update();
}

void ImGuiCanvas::wheelEvent(QWheelEvent* event) {
    ContextScope scope(m_context);
    ImGuiQtInput::wheel(ImGui::GetIO(), QPointF(event->angleDelta()) / 120.0);
    update();
}

void ImGuiCanvas::keyPressEvent(QKeyEvent* event) {
    ContextScope scope(m_context);
    ImGuiQtInput::key(ImGui::GetIO(), *event, true);
    update();
}

void ImGuiCanvas::keyReleaseEvent(QKeyEvent* event) {
    ContextScope scope(m_context);
    ImGuiQtInput::key(ImGui::GetIO(), *event, false);
    update();
}

void ImGuiCanvas::leaveEvent(QEvent* event) {
    ContextScope scope(m_context);
    ImGuiQtInput::mouseLeave(ImGui::GetIO());
    QOpenGLWidget::leaveEvent(event);
    update();
}

}  // namespace meshscope::ui
