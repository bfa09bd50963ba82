#include "ui/canvas/imgui_canvas.h"

#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <QKeyEvent>
#include <QMouseEvent>
#include <QOpenGLContext>
#include <QOpenGLFunctions>
#include <QTimer>
#include <QWheelEvent>
#include <chrono>

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
        doneCurrent();
    }
    ImGui::DestroyContext(m_context);
}

void ImGuiCanvas::initializeGL() {
    ContextScope scope(m_context);
    if (m_glReady) ImGui_ImplOpenGL3_Shutdown();  // re-parented: a new GL context
    ImGui_ImplOpenGL3_Init(context()->isOpenGLES() ? "#version 300 es" : "#version 130");
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
    if (m_followUp) {
        m_followUp = false;
        QTimer::singleShot(16, this, qOverload<>(&QWidget::update));
    }
    emit frameRendered();
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
